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

    rx = _rows(final_db_path, "SELECT id FROM prescriptions WHERE user_id = 1 AND medication_name = 'Atorvastatin' AND strength = '20 mg' AND status = 'active'")
    if len(rx) != 1:
        return {"result": "others"}
    rx_id = rx[0][0]
    initial_ids = {r[0] for r in _rows(initial_db_path, "SELECT id FROM refill_requests")}
    new_rows = [r for r in _rows(final_db_path, "SELECT id, prescription_id, user_id, pharmacy_name, status FROM refill_requests") if r[0] not in initial_ids]
    if not new_rows or any(r[1] != rx_id for r in new_rows):
        return {"result": "others"}
    good = [r for r in new_rows if r[2] == 1 and r[4] == "pending" and _norm(r[3]) == "cvs pharmacy elm street"]
    if len(good) != 1:
        return {"result": "others"}
    return {"result": "complete"}
