"""``suite audit``: decide whether a signed bundle's claims are real.

Steps (each a ``Check`` in the report, with evidence):

1. verify the bundle's signature and file list with the given public key; nothing else
   is trusted, and the audit stops here if it fails;
2. re-run ``suite check`` on the tree, under the round the bundle claims;
3. recompute accuracy from the full accuracy logs in ``evidence/`` and compare it with
   ``accuracy.txt``, its ``hash=`` line, and the signed claim;
4. replay chosen results on this machine from the recorded configuration (refusing
   when the local model differs) and compare the primary metric with the claim;
5. re-run the benchmark's compliance tests against each replay;
6. compare this machine with the bundle's system description.
"""

from suite.audit.report import AuditReport, Check
from suite.audit.steps import audit

__all__ = ["AuditReport", "Check", "audit"]
