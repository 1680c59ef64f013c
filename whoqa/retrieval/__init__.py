"""Retrieval: BM25F over Lucene (pyserini), the BERT ranker, and the per-question contexts the models read."""
