"""The CI image lane: the four steps' compiled commands run inside the built step image (scripts/image_lane/run.sh)."""
