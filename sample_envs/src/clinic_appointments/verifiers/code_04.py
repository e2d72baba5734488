def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3
    import re

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    rx = _rows(initial_db_path, "SELECT refills_remaining FROM prescriptions WHERE user_id = 1 AND medication_name = 'Lisinopril' AND strength = '10 mg' AND status = 'active'")
    if len(rx) != 1:
        return {"result": "others"}
    expected = rx[0][0]
    words = {0: "zero", 1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
    answer = (final_answer or "").lower()
    found = re.search(r"(?<![\w.\-/:])" + str(expected) + r"(?![\w.\-/:])", answer)
    if not found and expected in words:
        found = re.search(r"\b" + words[expected] + r"\b", answer)
    if not found:
        return {"result": "others"}
    for sql in ("SELECT * FROM prescriptions ORDER BY id", "SELECT * FROM refill_requests ORDER BY id"):
        if _rows(initial_db_path, sql) != _rows(final_db_path, sql):
            return {"result": "others"}
    return {"result": "complete"}
