def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3
    import re
    from datetime import datetime

    def _query(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = conn.execute(sql, params).fetchall()
        conn.close()
        return rows

    rows = _query(initial_db_path, "SELECT e.start_time FROM events e JOIN branches b ON b.id = e.branch_id "
                                   "WHERE e.title = 'Intro to Watercolor Painting' AND b.name = 'Riverside Branch'")
    if len(rows) != 1:
        return {"result": "others"}
    regs_before = _query(initial_db_path, "SELECT * FROM event_registrations ORDER BY id")
    regs_after = _query(final_db_path, "SELECT * FROM event_registrations ORDER BY id")
    if regs_before != regs_after:
        return {"result": "others"}
    answer = (final_answer or "").lower()
    start = datetime.strptime(rows[0][0], "%Y-%m-%d %H:%M:%S")
    month_full = start.strftime("%B").lower()
    month_abbr = start.strftime("%b").lower()
    day = start.day
    date_patterns = [
        re.escape(start.strftime("%Y-%m-%d")),
        rf"\b(?:{month_full}|{month_abbr})\.?\s+{day}(?:st|nd|rd|th)?\b",
        rf"\b{day}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{month_full}|{month_abbr})\b",
        rf"\b0?{start.month}/0?{day}(?:/{start.year})?\b",
    ]
    hour12 = start.hour % 12 or 12
    ampm = "p" if start.hour >= 12 else "a"
    time_patterns = [
        rf"\b{start.hour:02d}:{start.minute:02d}\b",
        rf"\b{hour12}(?::{start.minute:02d})?\s*{ampm}\.?\s*m\b\.?",
    ]
    if start.hour < 10:
        time_patterns.append(rf"(?<!\d){start.hour}:{start.minute:02d}\b")
    date_ok = any(re.search(p, answer) for p in date_patterns)
    time_ok = any(re.search(p, answer) for p in time_patterns)
    if date_ok and time_ok:
        return {"result": "complete"}
    return {"result": "others"}
