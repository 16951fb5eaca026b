//! The tables, defined once. template.yaml is held to these definitions by a test.
//!
//! Every table has the same key schema: string `pk` (partition) and string `sk` (sort), billed on
//! demand. Partition keys always begin with the project id taken from the authenticated key.

/// A table of ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Table {
    /// Projects, keys, users, groups and memberships.
    Main,
    /// Location history, one partition per project and user (a project-wide partition would be
    /// capped at 1,000 writes/s).
    Locations,
}

#[derive(Debug, Clone, Copy)]
pub struct TableDef {
    pub table: Table,
    /// Logical name; the default physical name is `waymark-<name>`.
    pub name: &'static str,
    /// The environment variable that carries the physical name (set by template.yaml).
    pub env: &'static str,
    /// The CloudFormation logical id in template.yaml.
    pub resource: &'static str,
}

pub const TABLES: &[TableDef] = &[
    TableDef { table: Table::Main, name: "main", env: "WAYMARK_MAIN_TABLE", resource: "MainTable" },
    TableDef { table: Table::Locations, name: "locations", env: "WAYMARK_LOCATIONS_TABLE", resource: "LocationsTable" },
];

pub const PARTITION_KEY: &str = "pk";
pub const SORT_KEY: &str = "sk";

impl Table {
    pub fn def(self) -> &'static TableDef {
        TABLES.iter().find(|d| d.table == self).expect("every table has a definition")
    }
}

/// Physical table names.
#[derive(Debug, Clone)]
pub struct TableNames(Vec<(Table, String)>);

impl TableNames {
    /// Names from the environment (`WAYMARK_MAIN_TABLE`, ...), else `<prefix><name>`.
    pub fn from_env(env: &crate::config::Env, prefix: &str) -> Self {
        Self(
            TABLES
                .iter()
                .map(|d| (d.table, env.get(d.env).map_or_else(|| format!("{prefix}{}", d.name), str::to_owned)))
                .collect(),
        )
    }
    pub fn with_prefix(prefix: &str) -> Self {
        Self(TABLES.iter().map(|d| (d.table, format!("{prefix}{}", d.name))).collect())
    }
    pub fn get(&self, t: Table) -> &str {
        self.0.iter().find(|(k, _)| *k == t).map(|(_, n)| n.as_str()).unwrap_or("")
    }
    pub fn all(&self) -> impl Iterator<Item = (Table, &str)> {
        self.0.iter().map(|(t, n)| (*t, n.as_str()))
    }
}
