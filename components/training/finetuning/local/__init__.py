"""The local launcher: a CPU trainer run in the train_model task itself (tests, demos, small models)."""
