/* A C module's header, as an embedded SQLite's would be. */
int csqlite_version_number(void);
