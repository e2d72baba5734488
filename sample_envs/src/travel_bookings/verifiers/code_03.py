def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import re
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    answer = final_answer or ""
    if not answer.strip():
        return {"result": "others"}
    sql = "SELECT la.id, la.points_balance, la.tier FROM loyalty_accounts la JOIN airlines a ON a.id = la.airline_id WHERE la.user_id = 1 AND a.name = 'Aurora Airways'"
    initial = _rows(initial_db_path, sql)
    final = _rows(final_db_path, sql)
    if len(initial) != 1 or initial != final:
        return {"result": "others"}
    expected = str(initial[0][1])
    normalized = re.sub(r"(?<=\d)[,\s\u202f\u00a0'.](?=\d{3}(?!\d))", "", answer)
    if not re.search(r"(?<![\d.])" + re.escape(expected) + r"(?!\d)", normalized):
        return {"result": "others"}
    return {"result": "complete"}
