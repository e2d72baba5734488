def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3
    import re
    from datetime import datetime

    def _query(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = conn.execute(sql, params).fetchall()
        conn.close()
        return rows

    sql = ("SELECT l.id, l.due_date FROM loans l JOIN copies c ON c.id = l.copy_id JOIN titles t ON t.id = c.title_id "
           "WHERE l.member_id = 1 AND l.status = 'active' AND t.title = 'The Silent Orchard' ORDER BY l.id")
    expected = _query(initial_db_path, sql)
    if len(expected) != 1:
        return {"result": "others"}
    loans_before = _query(initial_db_path, "SELECT * FROM loans WHERE member_id = 1 ORDER BY id")
    loans_after = _query(final_db_path, "SELECT * FROM loans WHERE member_id = 1 ORDER BY id")
    if loans_before != loans_after:
        return {"result": "others"}
    answer = (final_answer or "").lower()
    if not answer.strip():
        return {"result": "others"}
    d = datetime.strptime(expected[0][1], "%Y-%m-%d")
    month_full = d.strftime("%B").lower()
    month_abbr = d.strftime("%b").lower()
    day = d.day
    patterns = [
        re.escape(d.strftime("%Y-%m-%d")),
        rf"\b(?:{month_full}|{month_abbr})\.?\s+{day}(?:st|nd|rd|th)?\b",
        rf"\b{day}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{month_full}|{month_abbr})\b",
        rf"\b0?{d.month}/0?{day}/{d.year}\b",
        rf"\b0?{day}/0?{d.month}/{d.year}\b",
        rf"\b{d.year}/0?{d.month}/0?{day}\b",
    ]
    if any(re.search(p, answer) for p in patterns):
        return {"result": "complete"}
    return {"result": "others"}
