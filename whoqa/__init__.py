"""whoqa: questions about whole books. Layers, each importing only those before it (tests/test_layers.py):

    whoqa.core        book files, workspace layout and lock, run identity, seeds, folds, progress, aliases, metrics,
                      a question read once (Query)
    data_prep         books -> workspace files: parses, characters, coreference, Who set, artificial questions,
                      word vectors, adding a book
    whoqa.retrieval   BM25F (Lucene), the BERT ranker, the contexts every model reads, a book opened for questions
    whoqa.memnet      the key-value memory networks (Who questions)  | whoqa.reader  the trained readers (FiD, ...)
    whoqa.llm         the local LLMs: registry, files, runtimes, prompt, the reader that writes answers and scores names
    whoqa.ranker      the feature ranker of a book's characters (Who questions on any book), its cast and features
    whoqa.service     one path from a book and a question to an answer: Query -> route -> scorer -> Answer
    whoqa.evaluation  tables, unseen books, the routed full task, benchmarks, reproductions
    whoqa.answer_view an answer drawn for people: text for the terminal, JSON for the page
    whoqa.web         `whoqa serve`: the page and its JSON API
    whoqa.cli, cli.py `whoqa`, a thin mirror of the Python API (one module per command group)
"""
from whoqa.core import numerics  # noqa: E402,F401  (before torch or NumPy load: the same numbers on every machine)
