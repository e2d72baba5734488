def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def fetch(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    sql = ("SELECT r.id, r.user_id, r.order_item_id, o.order_number, oi.product_name, r.quantity, r.reason, r.status, r.refund_amount "
           "FROM returns r JOIN order_items oi ON oi.id = r.order_item_id JOIN orders o ON o.id = oi.order_id ORDER BY r.id")
    before = fetch(initial_db_path, sql)
    after = fetch(final_db_path, sql)
    initial_ids = {r["id"] for r in before}
    return {
        "task": "user 1 requests a return of 1 Aurora Wireless Headphones from order PC-1001, reason 'Left ear cup crackles at high volume'",
        "pc_1001_items": fetch(initial_db_path, "SELECT oi.id, oi.product_name, oi.quantity, oi.unit_price FROM order_items oi JOIN orders o ON o.id = oi.order_id WHERE o.order_number = 'PC-1001' ORDER BY oi.id"),
        "returns_initial": before,
        "new_returns": [r for r in after if r["id"] not in initial_ids],
        "existing_returns_changed": [r for r in after if r["id"] in initial_ids and r not in before],
    }
