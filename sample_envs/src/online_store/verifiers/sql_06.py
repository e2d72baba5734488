def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def fetch(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    sql = ("SELECT r.id, p.name AS product, r.user_id, r.rating, r.title, r.body FROM reviews r "
           "JOIN products p ON p.id = r.product_id ORDER BY r.id")
    before = fetch(initial_db_path, sql)
    after = fetch(final_db_path, sql)
    initial_ids = {r["id"] for r in before}
    return {
        "task": "user 1 posts a 5-star review 'Perfect daypack' on the Summit Trail Backpack 30L",
        "expected": {"product": "Summit Trail Backpack 30L", "rating": 5, "title": "Perfect daypack",
                     "body": "Comfortable straps and plenty of pockets for a full day hike."},
        "new_reviews": [r for r in after if r["id"] not in initial_ids],
        "deleted_review_ids": sorted(initial_ids - {r["id"] for r in after}),
        "user1_reviews_final": [r for r in after if r["user_id"] == 1],
    }
