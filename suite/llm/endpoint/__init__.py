"""The endpoint client: LLM samples streamed from OpenAI-compatible servers.

Modules, from the wire up:

* ``http_pool``: kept-alive HTTP/1.1 connections to one server (httptools);
* ``sse``: one streamed response's Server-Sent Events, folded as the bytes arrive;
* ``client``: ``EndpointClient``, the event loop that sends each sample as one request and
  reports its first token, its output ids and its errors (``ClientSettings``);
* ``workers``: client processes, each with its own ``EndpointClient``, that take the HTTP
  work off LoadGen's process;
* ``check``: the pre-flight probe before LoadGen starts (each server answers, lists the
  model, streams one request) and the record of what the servers said they are;
* ``backend``: the ``openai`` backend's registry entry and ``[backend.openai]`` options.

Nothing here imports LoadGen or the harness: the harness's ``EndpointSystemUnderTest``
drives these modules.
"""
