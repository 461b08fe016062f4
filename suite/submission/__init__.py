"""From runs to the official MLPerf tree and a signed bundle.

``workflow`` is ``package`` and ``sign`` as library calls; ``selection`` picks the runs and
compliance attempts from their records, ``package`` builds the tree,
``safety`` validates names and stages files, ``network`` adds the network division's
files, ``system_description`` writes the system JSON from what was probed, and
``bundle/`` signs and verifies the archive (DSSE, in-toto, Ed25519).
"""
