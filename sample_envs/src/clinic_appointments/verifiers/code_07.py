def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3
    import re

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    policy = _rows(initial_db_path, "SELECT member_id FROM insurance_policies WHERE user_id = 1 AND carrier_name = 'Blue Harbor Health' AND plan_name = 'Gold HMO 500'")
    if len(policy) != 1:
        return {"result": "others"}
    expected = re.sub(r"[^A-Z0-9]", "", policy[0][0].upper())
    answer = re.sub(r"[^A-Z0-9]", "", (final_answer or "").upper())
    if not expected or expected not in answer:
        return {"result": "others"}
    sql = "SELECT * FROM insurance_policies ORDER BY id"
    if _rows(initial_db_path, sql) != _rows(final_db_path, sql):
        return {"result": "others"}
    return {"result": "complete"}
