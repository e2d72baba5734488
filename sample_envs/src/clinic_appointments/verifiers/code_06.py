def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3
    import re

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    def _norm(text):
        return re.sub(r"[^a-z0-9]+", " ", (text or "").lower()).strip()

    provider = _rows(final_db_path, "SELECT id FROM providers WHERE first_name = 'Priya' AND last_name = 'Nair'")
    if len(provider) != 1:
        return {"result": "others"}
    provider_id = provider[0][0]
    initial_ids = {r[0] for r in _rows(initial_db_path, "SELECT id FROM messages")}
    new_rows = [r for r in _rows(final_db_path, "SELECT id, user_id, provider_id, direction, subject, body FROM messages") if r[0] not in initial_ids]
    good = [r for r in new_rows
            if r[1] == 1 and r[2] == provider_id and r[3] == "patient_to_provider"
            and _norm(r[4]) == "metformin side effects"
            and "i have had mild nausea after my evening metformin dose this week" in _norm(r[5])]
    if len(good) != 1:
        return {"result": "others"}
    if any(r[2] != provider_id for r in new_rows):
        return {"result": "others"}
    return {"result": "complete"}
