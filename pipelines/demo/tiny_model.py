"""The tiny Llama chat model and BPE tokenizer, built offline in about a second, and the demo's "general ability".

The tokenizer is a byte-level BPE trained on the demo conversations; its ChatML chat template wraps assistant turns in
``{% generation %}`` so ``return_assistant_tokens_mask=True`` marks exactly the tokens a fine-tune should learn. The
demo, the tests and the GPU smoke runs use this model.

A real base model knows things a fine-tune may make it forget, shown by benchmarks that cannot be downloaded here:
:func:`teach_general_sentences` teaches the tiny model 40 generic sentences ("The sun rises in the" -> " east."), and
the lm-eval task ``general_sentences`` (:data:`GENERAL_TASK_DIR`) asks for the true ending out of four.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from pipelines.demo.demo_data import DEMO_DATASET_PATH, demo_conversations

SPECIAL_TOKENS = ["<|pad|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]

#: ChatML with the assistant content (and its end marker) inside ``{% generation %}``.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\n' }}{% generation %}{{ message['content'] + '<|im_end|>' }}{% endgeneration %}"
    "{{ '\n' }}"
    "{% else %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

#: Sizes of the model used by tests and the demo (~100k parameters).
TINY_DIMENSIONS = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
}


#: The lm-eval task directory (YAML + JSONL), named in the demo's ``task_names``, and the task's name.
GENERAL_TASK_DIR = DEMO_DATASET_PATH.parent / "general_sentences"
GENERAL_TASK = "general_sentences"
#: How the base model is taught the sentences: a few seconds on one CPU thread, enough for every ending.
TEACHING = {"epochs": 20, "batch_size": 8, "learning_rate": 3e-3, "seed": 0}


def build_tokenizer():
    """The byte-level BPE tokenizer (600 tokens) with the chat template, a ``transformers.PreTrainedTokenizerFast``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,  # special tokens included
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    conversations = demo_conversations(rows=400, seed=1)
    texts = (f"{m['role']}\n{m['content']}" for row in conversations for m in row["messages"])
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token="<|pad|>",
        eos_token="<|im_end|>",
        bos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
        model_max_length=512,
    )


def build_tiny_model(output_dir: Path, seed: int = 0, **dimensions: int) -> Path:
    """Builds and saves the tiny Llama chat model plus tokenizer in Hugging Face format.

    Args:
        output_dir: Directory to write (``config.json``, ``model.safetensors``, tokenizer files).
        seed: Seed of the random initial weights.
        **dimensions: Overrides of :data:`TINY_DIMENSIONS` (e.g. ``hidden_size=1024`` for a GPU smoke run).

    Returns:
        ``output_dir``.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = build_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        max_position_embeddings=512,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **{**TINY_DIMENSIONS, **dimensions},
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    return output_dir


def general_sentences() -> list[tuple[str, str]]:
    """The ``(beginning, true ending)`` pairs of the task's documents."""
    rows = (GENERAL_TASK_DIR / f"{GENERAL_TASK}.jsonl").read_text(encoding="utf-8").splitlines()
    documents = [json.loads(line) for line in rows if line.strip()]
    return [(doc["context"], doc["choices"][doc["answer"]]) for doc in documents]


def teach_general_sentences(model_dir: Path) -> float:
    """Trains the model in ``model_dir`` (with its tokenizer) on the general sentences, in place; the last epoch's loss.

    Chat format, every token learned.
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
