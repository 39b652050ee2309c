"""The demo's "general ability": generic sentences the tiny base model is taught before it is fine-tuned.

A real base model knows things a fine-tune may make it forget, shown by benchmarks (``arc_easy``, ...) that cannot be
downloaded here. :func:`teach_general_sentences` teaches the tiny model to complete 40 generic sentences ("The sun
rises in the" -> " east."); the lm-eval task ``general_sentences`` (:data:`GENERAL_TASK_DIR`) asks for the true ending
out of four, on the base and the fine-tuned model, so the demo shows whether the fine-tune forgot it.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

#: The lm-eval task directory (YAML + JSONL), named in the demo's ``task_names``.
GENERAL_TASK_DIR = Path(__file__).resolve().parent / "data" / "general_sentences"
#: The task's name (its YAML's ``task:``).
GENERAL_TASK = "general_sentences"
#: How the base model is taught the sentences: a few seconds on one CPU thread, enough for every ending.
TEACHING = {"epochs": 20, "batch_size": 8, "learning_rate": 3e-3, "seed": 0}


def general_sentences() -> list[tuple[str, str]]:
    """The ``(beginning, true ending)`` pairs of the task's documents."""
    rows = (GENERAL_TASK_DIR / f"{GENERAL_TASK}.jsonl").read_text(encoding="utf-8").splitlines()
    documents = [json.loads(line) for line in rows if line.strip()]
    return [(doc["context"], doc["choices"][doc["answer"]]) for doc in documents]


def teach_general_sentences(model_dir: Path) -> float:
    """Trains the model in ``model_dir`` on the general sentences (chat format, every token) and saves it in place.

    Args:
        model_dir: A model directory in ``save_pretrained`` layout with its tokenizer (the tiny base model).

    Returns:
        The mean loss of the last epoch.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, DataCollatorForSeq2Seq

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    sequences = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": beginning}, {"role": "assistant", "content": ending}],
            tokenize=True,
            return_dict=True,
        )["input_ids"]
        for beginning, ending in general_sentences()
    ]
    collate = DataCollatorForSeq2Seq(tokenizer)  # pads right: input ids with the pad id, labels with -100
    torch.manual_seed(TEACHING["seed"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=TEACHING["learning_rate"])
    model.train()
    losses: list[float] = []
    for epoch in range(TEACHING["epochs"]):
        order = list(range(len(sequences)))
        random.Random(TEACHING["seed"] + epoch).shuffle(order)
        losses = []
        for start in range(0, len(order), TEACHING["batch_size"]):
            batch = [sequences[i] for i in order[start : start + TEACHING["batch_size"]]]
            loss = model(**collate([{"input_ids": ids, "labels": ids} for ids in batch])).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
    model.save_pretrained(model_dir)
    return sum(losses) / len(losses)
