"""Fine-tuning pipelines (SFT, OSFT, LoRA; expert and minimal flavours) and the ``kfp-finetune`` CLI."""
