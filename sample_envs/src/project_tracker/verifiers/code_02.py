def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3
    import re

    def _sprint(path):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute("SELECT s.end_date, s.goal, s.status FROM sprints s JOIN projects p ON p.id = s.project_id "
                                "WHERE p.name = 'Mobile App' AND s.name = 'Sprint 15'").fetchone()
        finally:
            conn.close()

    before = _sprint(initial_db_path)
    after = _sprint(final_db_path)
    if before is None or before != after:
        return {"result": "others"}
    answer = (final_answer or "").lower()
    date_patterns = [r"2026-03-17", r"2026/03/17", r"03/17/2026", r"17/03/2026", r"17\.03\.2026",
                     r"march\s+17(th)?\b", r"\bmar\.?\s+17(th)?\b", r"\b17(th)?\s+(of\s+)?march", r"\b17(th)?\s+mar\b"]
    if not any(re.search(p, answer) for p in date_patterns):
        return {"result": "others"}
    flat = re.sub(r"[^a-z0-9]+", " ", answer)
    if "offline mode beta" not in flat or "testflight" not in flat.replace(" ", ""):
        return {"result": "others"}
    return {"result": "complete"}
