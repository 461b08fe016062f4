"""``suite serve``: the reference model on a real serving engine on this machine.

* ``runtime``: the MLServer runtime (an ``mlserver.MLModel``) that runs a model card's
  ONNX file with onnxruntime. It is imported only inside the MLServer process: MLServer
  and tritonclient register the same protobuf symbols and cannot share a process.
* ``launcher``: writes one MLServer settings directory per replica and starts
  ``mlserver start`` on free loopback ports, waiting until the model is ready.
* ``writers``: a Triton model repository and a KServe ``InferenceService`` manifest
  for the same card (written, not run here).
"""
