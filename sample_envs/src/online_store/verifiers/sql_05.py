def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def fetch(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    sql = "SELECT order_number, user_id, status, total, updated_at FROM orders ORDER BY id"
    before = fetch(initial_db_path, sql)
    after = fetch(final_db_path, sql)
    final_by_number = {r["order_number"]: r for r in after}
    changed = [{"before": b, "after": final_by_number.get(b["order_number"])} for b in before
               if final_by_number.get(b["order_number"]) != b]
    stock_sql = ("SELECT v.sku, v.stock_quantity FROM product_variants v WHERE v.id IN "
                 "(SELECT oi.variant_id FROM order_items oi JOIN orders o ON o.id = oi.order_id WHERE o.order_number = 'PC-1004') ORDER BY v.id")
    return {
        "task": "cancel user 1's pending order PC-1004",
        "pc_1004_initial": [r for r in before if r["order_number"] == "PC-1004"],
        "pc_1004_final": [r for r in after if r["order_number"] == "PC-1004"],
        "changed_orders": changed,
        "pc_1004_item_stock_initial": fetch(initial_db_path, stock_sql),
        "pc_1004_item_stock_final": fetch(final_db_path, stock_sql),
    }
