def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3
    import re

    def rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    sql = "SELECT status, total FROM orders WHERE order_number = 'PC-1003' AND user_id = 1"
    before = rows(initial_db_path, sql)
    after = rows(final_db_path, sql)
    if not before or before != after:
        return {"result": "others"}
    status, total = before[0]
    text = (final_answer or "").lower().replace("$", "").replace(",", "")
    if not re.search(r"\b" + re.escape(status.lower()) + r"\b", text):
        return {"result": "others"}
    amounts = [float(m) for m in re.findall(r"\d+(?:\.\d+)?", text)]
    if not any(abs(a - float(total)) < 0.005 for a in amounts):
        return {"result": "others"}
    return {"result": "complete"}
