"""Examples of using kfp-finetune components in your own pipelines."""
