"""The trained readers of other questions: Fusion-in-Decoder (Izacard & Grave 2020, as used by Mou et al. 2021 §4.1)
with book prereading, the pointer (span) reader and the lookup of similar training questions. The local LLMs that
read passages without training are whoqa.llm.

Stages and their artifacts (under the workspace WS):
    examples   WS/reader/examples/<context>.json: FiD's data contract, one record per question:
               {"question_id", "document_id", "question", "answers": [answer1, answer2], "passages": [text, ...]}
               passages = the question's top windows from WS/contexts/<context>/ (or none for the no-context reader;
               "oracle" = BM25F with the question plus its answers, Mou et al.'s upper bound)
    preread    WS/models/preread/: the reader after restoring masked passages of books no question is asked about
    train      WS/reader/runs/<name>/fold<k>.json: generated answers for the books of fold k from a reader trained
               on the other folds' books (book-level cross-validation: a book's questions are never trained on
               before they are answered); the fold's model in WS/models/reader/<name>/fold<k>/ (save_pretrained)
    eval       WS/results/full_task.{json,txt}: ROUGE-L, BLEU-1/4, EM, F1 of every reader run and of the routed
               system (Who questions -> memory network, the rest -> reader)
"""
