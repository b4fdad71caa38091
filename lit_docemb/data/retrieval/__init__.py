"""Retrieval on the ranking corpora: training examples and negatives, TREC queries, qrels, runs and folds, BM25."""
