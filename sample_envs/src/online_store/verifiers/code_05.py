def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    target_sql = "SELECT status FROM orders WHERE order_number = 'PC-1004' AND user_id = 1"
    before = rows(initial_db_path, target_sql)
    after = rows(final_db_path, target_sql)
    if not before or not after or before[0][0] != "pending" or after[0][0] != "cancelled":
        return {"result": "others"}
    others_sql = "SELECT order_number, status FROM orders WHERE order_number != 'PC-1004' ORDER BY id"
    initial_others = rows(initial_db_path, others_sql)
    final_others = dict(rows(final_db_path, others_sql))
    for number, status in initial_others:
        if final_others.get(number) != status:
            return {"result": "others"}
    return {"result": "complete"}
