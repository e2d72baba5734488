def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _fetch(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    sql = ("SELECT r.id, r.prescription_id, p.medication_name, p.strength, p.status AS prescription_status, r.user_id, r.pharmacy_name, r.status, r.notes "
           "FROM refill_requests r JOIN prescriptions p ON p.id = r.prescription_id ORDER BY r.id")
    initial = _fetch(initial_db_path, sql)
    final = _fetch(final_db_path, sql)
    initial_ids = {r["id"] for r in initial}
    return {
        "expected": {"medication": "Atorvastatin 20 mg (active, user 1)", "pharmacy_name": "CVS Pharmacy - Elm Street", "status": "pending"},
        "user1_atorvastatin_prescriptions": _fetch(final_db_path, "SELECT id, medication_name, strength, status, pharmacy_name FROM prescriptions WHERE user_id = 1 AND medication_name = 'Atorvastatin'"),
        "new_refill_requests": [r for r in final if r["id"] not in initial_ids],
        "refill_request_count": {"initial": len(initial), "final": len(final)},
        "changed_existing_requests": [r for r in final if r["id"] in initial_ids and r not in initial],
    }
