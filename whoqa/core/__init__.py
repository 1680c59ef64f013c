"""The small core every layer stands on: book files, the workspace layout and lock, run identity, seeds, folds,
progress bars, character aliases and metrics. Imports nothing else of whoqa or data_prep."""
