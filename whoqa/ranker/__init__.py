"""The feature ranker: Who answers for any book, with no training on it (a conditional logit over features that mean
the same in every book, then a local LLM reading the passages for its top k). `features` builds a question's
features (one registry, used by cross-validation and serving alike), `model` fits and applies the two stages, `fits`
reads and writes fitted rankers (the shipped one included), `serve` answers a question with them."""
