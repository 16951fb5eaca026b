-- PostGIS side of scripts/bench/geofences.sh: load the fences exported by
-- examples/geofence_bench.rs (psql -v dir=<export dir>), index them, and time the same nearby
-- searches server-side (one query at a time, inside PL/pgSQL; no client round trip).
--
-- "Shape comes within r of the point": circles are stored as their centre with the radius, and a
-- circle matches when ST_DWithin(centre, point, r + radius) (exact on the spheroid, as Waymark's
-- geodesic test); the constant ST_DWithin(centre, point, r + 1000) before it lets the GiST index
-- work (1000 m is the largest circle). Polygons match on ST_DWithin(polygon, point, r). Both are
-- geography (WGS 84, spheroid distances); distances reported are those of Waymark's search
-- (0 inside, else to the circle's edge / the polygon's boundary).
\set ON_ERROR_STOP on
SET client_min_messages = warning;
\timing off
CREATE EXTENSION IF NOT EXISTS postgis;
DROP TABLE IF EXISTS fences_raw, circles, polygons, queries, timings;
CREATE TABLE fences_raw (id text, kind text, lng float8, lat float8, radius_m float8, wkt text);
\set fences_csv :dir '/fences.csv'
\set queries_csv :dir '/queries.csv'
COPY fences_raw FROM :'fences_csv' CSV HEADER;
\timing on
CREATE TABLE circles AS
  SELECT id, radius_m, ST_SetSRID(ST_MakePoint(lng, lat), 4326)::geography AS geog FROM fences_raw WHERE kind = 'circle';
CREATE TABLE polygons AS
  SELECT id, ST_GeogFromText('SRID=4326;' || wkt) AS geog FROM fences_raw WHERE kind = 'polygon';
CREATE INDEX circles_geog ON circles USING gist (geog);
CREATE INDEX polygons_geog ON polygons USING gist (geog);
\timing off
ANALYZE circles;
ANALYZE polygons;
CREATE TABLE queries (qid int PRIMARY KEY, lng float8, lat float8);
COPY queries FROM :'queries_csv' CSV HEADER;
CREATE TABLE timings (radius_m float8, qid int, ms float8, n int, hits text);

-- The search: hits as "id:distance" nearest first (ties by id), as Waymark returns them.
CREATE OR REPLACE FUNCTION nearby(pt geography, r float8) RETURNS TABLE (n bigint, hits text)
LANGUAGE sql STABLE AS $$
  SELECT count(*), string_agg(id || ':' || to_char(d, 'FM999990.000'), ' ' ORDER BY d, id) FROM (
    SELECT id, ST_Distance(geog, pt) AS d FROM polygons WHERE ST_DWithin(geog, pt, r)
    UNION ALL
    SELECT id, greatest(ST_Distance(geog, pt) - radius_m, 0) FROM circles
      WHERE ST_DWithin(geog, pt, r + 1000) AND ST_DWithin(geog, pt, r + radius_m)
  ) s
$$;

CREATE OR REPLACE FUNCTION bench(r float8, warmup int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE q record; t0 timestamptz; res record;
BEGIN
  FOR q IN SELECT * FROM queries ORDER BY qid LIMIT warmup LOOP
    PERFORM * FROM nearby(ST_SetSRID(ST_MakePoint(q.lng, q.lat), 4326)::geography, r);
  END LOOP;
  FOR q IN SELECT * FROM queries ORDER BY qid LOOP
    t0 := clock_timestamp();
    SELECT * INTO res FROM nearby(ST_SetSRID(ST_MakePoint(q.lng, q.lat), 4326)::geography, r);
    INSERT INTO timings VALUES (r, q.qid, extract(epoch FROM clock_timestamp() - t0) * 1000, res.n, res.hits);
  END LOOP;
END $$;

-- The plan of one search (index scans expected on both tables).
EXPLAIN (COSTS OFF)
  SELECT id FROM polygons WHERE ST_DWithin(geog, 'SRID=4326;POINT(10.5 51)'::geography, 5000)
  UNION ALL
  SELECT id FROM circles WHERE ST_DWithin(geog, 'SRID=4326;POINT(10.5 51)'::geography, 5000 + 1000)
    AND ST_DWithin(geog, 'SRID=4326;POINT(10.5 51)'::geography, 5000 + radius_m);
