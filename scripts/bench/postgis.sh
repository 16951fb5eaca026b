# Sourced by the benchmarks that set Waymark against PostGIS (geofences.sh, city_search.sh).
# pg_start DIR LISTEN: a throwaway PostgreSQL 15 cluster with PostGIS 3 in DIR on a free port,
# run as user postgres when root; LISTEN is `''` (its socket in DIR only) or `127.0.0.1` (TCP
# too). Sets pgdir, pgport and pg_stop (the command that stops it: the caller's EXIT trap evals
# it). Installs postgresql-15-postgis-3 with apt-get when missing.
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
pg_start() {
  pgbin=/usr/lib/postgresql/15/bin
  if ! [ -x "$pgbin/initdb" ] || ! [ -f /usr/share/postgresql/15/extension/postgis.control ]; then
    printf '### installing postgresql-15-postgis-3\n' >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q postgresql-15-postgis-3 >/dev/null ||
      { apt-get update -q >/dev/null && apt-get install -y -q postgresql-15-postgis-3 >/dev/null; }
  fi
  pgdir="$1"
  pgport="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  rm -rf "$pgdir"
  mkdir -p "$pgdir"
  if [ "$(id -u)" = 0 ]; then chown postgres "$pgdir"; fi
  as_pg "$pgbin/initdb" -D "$pgdir/data" -A trust -U postgres >/dev/null
  as_pg "$pgbin/pg_ctl" -D "$pgdir/data" -l "$pgdir/log" -w \
    -o "-p $pgport -k $pgdir -c listen_addresses='$2' -c shared_buffers=512MB -c work_mem=32MB" start >/dev/null
  pg_stop="as_pg $pgbin/pg_ctl -D $pgdir/data -m fast -w stop >/dev/null"
}
