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

    sql = ("SELECT a.id, a.status, a.cancellation_reason, a.scheduled_start FROM appointments a "
           "JOIN providers p ON p.id = a.provider_id WHERE a.user_id = 1 AND p.first_name = 'Priya' "
           "AND p.last_name = 'Natarajan' ORDER BY a.id")
    before = {r[0]: r for r in _rows(initial_db_path, sql)}
    after = {r[0]: r for r in _rows(final_db_path, sql)}
    targets = [i for i, r in before.items() if r[1] == "scheduled" and str(r[3]).startswith("2026-04-14")]
    if len(targets) != 1:
        return {"result": "others"}
    target = after.get(targets[0])
    if target is None or target[1] != "cancelled":
        return {"result": "others"}
    if "schedule conflict at work" not in _norm(target[2]):
        return {"result": "others"}
    for i, r in before.items():
        if i != targets[0] and r[1] == "scheduled" and (i not in after or after[i][1] != "scheduled"):
            return {"result": "others"}
    return {"result": "complete"}
