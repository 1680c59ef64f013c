import pytest

from data_prep.narrativeqa import DataError, NarrativeQA, extract_body, read_csv, read_text

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
