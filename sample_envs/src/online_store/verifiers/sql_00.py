def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def fetch(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    sql = ("SELECT o.order_number, o.status, o.subtotal, o.discount_amount, o.shipping_fee, o.total, o.updated_at, c.code AS coupon_code "
           "FROM orders o LEFT JOIN coupons c ON c.id = o.coupon_id WHERE o.order_number = 'PC-1003'")
    before = fetch(initial_db_path, sql)
    after = fetch(final_db_path, sql)
    all_sql = "SELECT order_number, status, total FROM orders ORDER BY id"
    return {
        "task": "read-only: report status and total of order PC-1003",
        "expected_answer": {"status": before[0]["status"], "total": before[0]["total"]} if before else None,
        "order_pc_1003_initial": before,
        "order_pc_1003_final": after,
        "orders_table_unchanged": fetch(initial_db_path, all_sql) == fetch(final_db_path, all_sql),
    }
