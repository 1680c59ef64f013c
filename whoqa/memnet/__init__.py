"""The key-value memory network for Who questions (Angelidis et al. 2019): model, memory arrays, pretraining and
cross-validated training, checkpoints that survive new books, test-time adaptation, ask, ablations."""
