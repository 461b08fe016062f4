"""Our round-LLM accuracy against the reference evaluation's, on the same accuracy log.

The reference (mlcommons/inference ``language/llama3.1-8b/evaluation.py`` and
``language/llama2-70b/evaluate-accuracy.py``) decodes the log's ids with transformers
(``AutoTokenizer.from_pretrained(model dir, use_fast=False).batch_decode(ids,
skip_special_tokens=True)``: the model's ``tokenizer_config.json`` clean-up, sentencepiece
for llama2-70b), strips, splits sentences with ``nltk.sent_tokenize``, and scores with
Hugging Face ``evaluate``'s "rouge" (``use_stemmer=True, use_aggregator=False``), mean x 100
rounded to 4 places; ``gen_len`` counts characters. Here both sides start from the same
token ids: ours decodes them with the suite's decoder and scores them with
``suite.llm.round.scoring`` in this process; the reference's steps, decoding included, run
in a separate environment that has ``transformers`` (the reference pins 4.46.2),
``evaluate``, ``nltk`` and ``rouge_score`` installed (``--reference-python``), with the
model directory the run used, the metric script loaded from a local directory
(``--rouge-metric``: ``metrics/rouge`` of huggingface/evaluate) and nltk's punkt data from
``--nltk-data``, so nothing reaches the network. Every figure must agree exactly, the
decoded texts too (the first difference is printed).

    python bench/bench_rouge_reference.py RUN_DIR --reference-python ENV/bin/python \
        --rouge-metric DIR --nltk-data DIR
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from suite.llm.accuracy import decode_outputs  # noqa: E402
from suite.llm.card import load_llm_card  # noqa: E402
from suite.llm.dataset import LLMDataset  # noqa: E402
from suite.llm.round import scoring as round_accuracy  # noqa: E402
from suite.paths import find_paths  # noqa: E402

# The reference's steps, run in the reference environment (argv: pairs.json, metric dir,
# model dir): its own decode of the token ids, then its scoring.
REFERENCE = r'''
import json, sys
import evaluate, nltk, numpy as np
from transformers import AutoTokenizer
pairs = json.load(open(sys.argv[1]))
tokenizer = AutoTokenizer.from_pretrained(sys.argv[3], use_fast=False)
decoded = tokenizer.batch_decode(pairs["token_ids"], skip_special_tokens=True)
print(json.dumps({"decoded": decoded}))
preds = [p.strip() for p in decoded]
targets = [t.strip() for t in pairs["references"]]
preds = ["\n".join(nltk.sent_tokenize(p)) for p in preds]
targets = ["\n".join(nltk.sent_tokenize(t)) for t in targets]
metric = evaluate.load(sys.argv[2])
result = metric.compute(predictions=preds, references=targets, use_stemmer=True,
                        use_aggregator=False)
result = {k: round(np.mean(v) * 100, 4) for k, v in result.items()}
result["gen_len"] = int(np.sum([len(p) for p in preds]))
result["gen_num"] = len(preds)
print(json.dumps(result))
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="a finished accuracy run of an LLM benchmark")
    parser.add_argument("--reference-python", required=True)
    parser.add_argument("--rouge-metric", required=True, type=Path)
    parser.add_argument("--nltk-data", required=True, type=Path)
    args = parser.parse_args()
    config = json.loads((args.run_dir / "config.json").read_text())
    card = load_llm_card(find_paths(), config["benchmark"])
    data = config.get("data", {})
    dataset = LLMDataset(card, data.get("dataset_dir", ""), data.get("model_path", ""))
    outputs = decode_outputs(args.run_dir / "accuracy" / "mlperf_log_accuracy.json",
                             dataset.total_count)
    texts = [dataset.tokenizer.decode(o) for o in outputs]
    ours = round_accuracy.score(outputs, texts, dataset.references, with_tokens=False)
    model_dir = str(Path(data.get("model_path", "")).resolve())
    with tempfile.TemporaryDirectory() as tmp:
        pairs = Path(tmp) / "pairs.json"
        # the ids, not our texts: the reference decodes them itself
        pairs.write_text(json.dumps({"token_ids": outputs, "references": dataset.references}))
        env = {"HF_HUB_OFFLINE": "1", "HF_EVALUATE_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "NLTK_DATA": str(args.nltk_data), "PATH": "/usr/bin:/bin",
               "HOME": tmp}
        done = subprocess.run([args.reference_python, "-c", REFERENCE, str(pairs),
                               str(args.rouge_metric), model_dir], env=env,
                              capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(done.stderr[-2000:], file=sys.stderr)
        return 1
    printed = done.stdout.strip().splitlines()
    decoded = json.loads(next(line for line in printed if line.startswith('{"decoded"')))
    theirs = json.loads(printed[-1])
    differ = [i for i, (a, b) in enumerate(zip(texts, decoded["decoded"], strict=True))
              if a != b]
    print(f"decoded texts: {len(texts) - len(differ)} of {len(texts)} equal"
          + (f"; first difference, sample {differ[0]}: ours {texts[differ[0]]!r}, reference "
             f"{decoded['decoded'][differ[0]]!r}" if differ else ""))
    rows = [(key, ours[key], theirs.get(key)) for key in theirs]
    for key, mine, reference in rows:
        print(f"{key:10s} ours {mine!s:>12} reference {reference!s:>12} "
              f"{'equal' if mine == reference else 'DIFFERENT'}")
    equal = all(mine == reference for _, mine, reference in rows) and not differ
    print(f"{config['benchmark']}: {len(texts)} samples; "
          f"{'every figure equal' if equal else 'figures differ'}")
    return 0 if equal else 2


if __name__ == "__main__":
    sys.exit(main())
