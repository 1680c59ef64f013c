import pytest

from data_prep.narrativeqa import NarrativeQA, read_csv, read_text
from whoqa.core.text import DataError, extract_body

GUTENBERG = ("The Project Gutenberg EBook of X\r\n\r\n*** START OF THIS PROJECT GUTENBERG EBOOK X ***\r\n\r\n"
             "Produced by Some Volunteer\r\nand friends\r\n\r\nCHAPTER I\r\n\r\nEmma walked home.\r\n\r\n"
             "End of the Project Gutenberg EBook of X\r\n\r\n*** END OF THIS PROJECT GUTENBERG EBOOK X ***\r\n"
             "licence text new eBooks .\r\n")


def test_extract_body_cuts_header_credits_and_licence(tmp_path):
    p = tmp_path / "b.txt"
    p.write_bytes(GUTENBERG.encode())
    body = extract_body(read_text(p), "Produced by Some", "new eBooks .")
    assert body == "CHAPTER I\n\nEmma walked home.\n"
    assert "\r" not in body


def test_extract_body_falls_back_to_markers_without_story_phrases():
    body = extract_body(GUTENBERG.replace("\r\n", "\n"))
    assert body.startswith("CHAPTER I") and "licence" not in body


def test_extract_body_two_line_start_marker():
    text = "head\n***START OF THE PROJECT GUTENBERG EBOOK A JOURNEY THROUGH\nFRANCE***\n\nStory here.\n"
    assert extract_body(text, "FRANCE***", "") == "Story here.\n"


def test_story_end_phrase_with_nqa_tokenisation():
    text = "Begin the story. The end.\nsee http://www.gutenberg.net/GUTINDEX.ALL\n"
    assert extract_body(text, "Begin the", "http : //www.gutenberg.net/GUTINDEX.ALL").endswith("GUTINDEX.ALL\n")


def test_non_utf8_text_is_decoded(tmp_path):
    p = tmp_path / "b.txt"
    p.write_bytes("Caf\u00e9 \u201cquoted\u201d".encode("cp1252"))
    assert read_text(p) == "Caf\u00e9 \u201cquoted\u201d"


def test_malformed_csv_rows_are_skipped_and_counted_and_ids_stay_row_numbers(tmp_path, caplog):
    p = tmp_path / "qaps.csv"
    p.write_text('document_id,set,question,answer1,answer2\n'
                 'a,test,Who is it?,Emma,Emma Woodhouse\n'
                 'b,test,broken row\n'
                 'c,test,"Who, then?",Knightley,Mr. Knightley\n')
    rows, rep = read_csv(p, ["document_id", "set", "question", "answer1", "answer2"])
    assert [i for i, _ in rows] == [0, 2]
    assert rows[1][1]["question"] == "Who, then?"
    assert rep.rows == 3 and len(rep.skipped) == 1 and "row 1" in rep.skipped[0]


def test_missing_column_names_the_file(tmp_path):
    p = tmp_path / "documents.csv"
    p.write_text("id,title\nx,y\n")
    with pytest.raises(DataError, match="documents.csv.*missing column"):
        read_csv(p, ["document_id", "story_start"])


def test_shared_folder_reads(shared_data):
    nqa = NarrativeQA(shared_data)
    docs = nqa.documents()
    qs = nqa.questions()
    assert len(docs) == 1572 and len(qs) == 1200
    assert qs[0].question_id == 0 and qs[0].document_id in docs
    assert len(nqa.book_ids()) == 41
    body = nqa.book_text("09333c7d604bd412e6aef5d3e56b046ed301c5e5", docs)
    assert body.startswith("The Adventure of the Dying Detective")
    assert "PROJECT GUTENBERG" not in body.upper().replace("PROJECT GUTENBERG-TM", "")


def test_missing_folder_and_book_say_what_to_run(tmp_path):
    with pytest.raises(DataError, match="whoqa download"):
        NarrativeQA(tmp_path / "nope")
    (tmp_path / "narrativeqa").mkdir()
    with pytest.raises(DataError, match="documents.csv not found"):
        NarrativeQA(tmp_path).documents()


def test_quoted_newlines_survive_and_a_broken_row_shifts_no_id(tmp_path):
    from data_prep.narrativeqa import QUESTION_COLUMNS, SUMMARY_COLUMNS, read_csv
    (tmp_path / "summaries.csv").write_text('document_id,set,summary\nd1,test,"First paragraph.\nSecond one."\n'
                                            'd2,test,"x"\n')
    rows, _ = read_csv(tmp_path / "summaries.csv", SUMMARY_COLUMNS)
    assert rows[0][1]["summary"] == "First paragraph.\nSecond one." and rows[1] == (1, {"document_id": "d2",
                                                                                         "set": "test", "summary": "x"})
    lines = ["document_id,set,question,answer1,answer2"] + [f"d,test,Who is {i}?,a{i},b{i}" for i in range(30)]
    lines[4] = 'd,test,"Who is 3?,a3,b3'  # an unterminated quote would swallow every row after it
    (tmp_path / "qaps.csv").write_text("\n".join(lines) + "\n")
    rows, report = read_csv(tmp_path / "qaps.csv", QUESTION_COLUMNS)
    assert [i for i, _ in rows] == [i for i in range(30) if i != 3]  # ids are the official row numbers
    assert all(r["question"] == f"Who is {i}?" for i, r in rows)
    assert report.skipped == ["line 5 (row 3): 3 fields, expected 5"]


def test_shared_summaries_keep_their_paragraphs(shared_data):
    from data_prep.narrativeqa import NarrativeQA
    summaries = NarrativeQA(shared_data).summaries()
    assert sum("\n" in s for s in summaries.values()) >= 30 and not any("again.Tabitha" in s for s in summaries.values())
