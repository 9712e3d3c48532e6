"""Views: the SQL of sql/views/ created in DuckDB, documented, fingerprinted, queried."""
