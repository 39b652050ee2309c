"""Builds a tiny Llama chat model and BPE tokenizer offline, in about a second.

The tokenizer is a byte-level BPE trained on the demo conversations; its ChatML-style chat template wraps assistant
turns in ``{% generation %}`` so ``apply_chat_template(..., return_assistant_tokens_mask=True)`` marks exactly the
tokens a fine-tune should learn. Nothing is downloaded: the demo, the tests and the GPU smoke runs use this model.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pipelines.demo.demo_data import demo_conversations

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


def _training_texts() -> Iterable[str]:
    """Yields the role names and message texts the tokenizer is trained on (400 generated conversations)."""
    for row in demo_conversations(rows=400, seed=1):
        for message in row["messages"]:
            yield f"{message['role']}\n{message['content']}"


def build_tokenizer():
    """Trains the byte-level BPE tokenizer (600 tokens) and wraps it with the chat template.

    Returns:
        A ``transformers.PreTrainedTokenizerFast``.
    """
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
    tokenizer.train_from_iterator(_training_texts(), trainer=trainer)
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
