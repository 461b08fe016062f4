"""The whisper task's fixed names and limits (``suite.tasks.librispeech`` and its stand-in).

Owns what the dataset layout, the ONNX contract and the decoding share: the manifest and
model-folder file names, the tensor names, the prompt and end tokens
(``speech2text/QSL.py``), the generation limit and the clip limit
(``speech2text/reference_SUT.py``, ``manifest.py``), the round's sample count.
"""

from __future__ import annotations

#: ``download_dataset.sh``: the repackaged manifest in the dataset directory.
MANIFEST = "dev-all-repack.json"
#: Beside the ONNX file: the Hugging Face repository's tokenizer and spelling map.
TOKENIZER = "tokenizer.json"
SPELLING_MAP = "normalizer.json"
#: ``manifest.py``'s ``max_duration`` (``MAX_DURATION``, default 30.0 s).
MAX_DURATION_S = 30.0
#: ``reference_SUT.py``: ``SamplingParams(temperature=0, top_p=1.0, max_tokens=200)``.
MAX_NEW_TOKENS = 200
#: ``QSL.py``'s prompt.
PROMPT_TOKENS = ("<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>")
EOS_TOKEN = "<|endoftext|>"
#: The ONNX contract's tensors (``WhisperForConditionalGeneration``'s forward names).
INPUT, DECODER_INPUT, OUTPUT = "input_features", "decoder_input_ids", "logits"
#: The submission checker's dataset size for whisper.
TOTAL_SAMPLES = 1633
