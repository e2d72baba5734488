def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3
    import re

    def rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    item = rows(initial_db_path, "SELECT oi.id FROM order_items oi JOIN orders o ON o.id = oi.order_id "
                                 "WHERE o.order_number = 'PC-1001' AND o.user_id = 1 AND oi.product_name = 'Aurora Wireless Headphones'")
    if len(item) != 1:
        return {"result": "others"}
    item_id = item[0][0]
    sql = "SELECT id, order_item_id, user_id, quantity, reason, status FROM returns ORDER BY id"
    initial_ids = {r[0] for r in rows(initial_db_path, sql)}
    new_rows = [r for r in rows(final_db_path, sql) if r[0] not in initial_ids]
    if len(new_rows) != 1:
        return {"result": "others"}
    _, order_item_id, user_id, quantity, reason, status = new_rows[0]
    norm = lambda s: re.sub(r"\s+", " ", (s or "").strip().strip("'\"").strip()).rstrip(".").lower()
    if order_item_id != item_id or user_id != 1 or quantity != 1 or status != "requested":
        return {"result": "others"}
    if norm(reason) != "left ear cup crackles at high volume":
        return {"result": "others"}
    return {"result": "complete"}
