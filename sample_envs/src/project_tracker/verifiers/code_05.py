def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3
    import re

    def _logs(path):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute("SELECT t.id, t.user_id, t.minutes, t.work_date, t.note FROM time_logs t "
                                "JOIN issues i ON i.id = t.issue_id WHERE i.issue_key = 'WEB-5' ORDER BY t.id").fetchall()
        finally:
            conn.close()

    before_ids = {r[0] for r in _logs(initial_db_path)}
    new_rows = [r for r in _logs(final_db_path) if r[0] not in before_ids]
    if len(new_rows) != 1:
        return {"result": "others"}
    _, user_id, minutes, work_date, note = new_rows[0]
    if user_id != 1 or minutes != 135 or str(work_date)[:10] != "2026-03-10":
        return {"result": "others"}
    flat = re.sub(r"[^a-z0-9]+", " ", (note or "").lower()).strip()
    if flat != "reworked tab index and added skip link":
        return {"result": "others"}
    return {"result": "complete"}
