def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def fetch(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    sql = ("SELECT p.name AS product, p.is_active, COUNT(r.id) AS review_count, ROUND(AVG(r.rating), 2) AS average_rating "
           "FROM products p LEFT JOIN reviews r ON r.product_id = p.id WHERE p.name LIKE 'Aurora Wireless%' GROUP BY p.id ORDER BY p.id")
    before = fetch(initial_db_path, sql)
    after = fetch(final_db_path, sql)
    target = [r for r in before if r["product"] == "Aurora Wireless Headphones"]
    return {
        "task": "read-only: average rating and review count of the current Aurora Wireless Headphones",
        "expected_answer": target[0] if target else None,
        "distractor_products": [r for r in before if r["product"] != "Aurora Wireless Headphones"],
        "rating_summary_initial": before,
        "rating_summary_final": after,
        "reviews_unchanged": before == after,
    }
