//! The NusaX paper's translation figures (SacreBLEU), as printed: Table 4 (x → ind) and Table 6
//! (ind → x), a row per system with a column per language in [`super::data::non_pivot_languages`]
//! order and the row's average, and Table 5's averages to and from English.
use super::data::{non_pivot_languages, Table};

/// A system of the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum System {
    /// The source sentence as its own translation.
    Copy,
    /// Dictionary-based word substitution with the NusaX lexicon.
    WordSubstitution,
    /// Phrase-based SMT (Moses): not run by indolm; its output can be scored with `eval bleu`.
    Pbsmt,
    /// IndoGPT fine-tuned on "source → target".
    IndoGpt,
    /// IndoBARTv2 fine-tuned.
    IndoBartV2,
    /// mBART-50 fine-tuned.
    Mbart50,
    /// mT5-base fine-tuned.
    Mt5Base,
}

impl System {
    /// The name on the command line and in file names (`word-substitution`).
    pub fn name(&self) -> &'static str {
        match self {
            System::Copy => "copy",
            System::WordSubstitution => "word-substitution",
            System::Pbsmt => "pbsmt",
            System::IndoGpt => "indo-gpt",
            System::IndoBartV2 => "indo-bart-v2",
            System::Mbart50 => "mbart50",
            System::Mt5Base => "mt5-base",
        }
    }

    /// The row label the paper prints.
    pub fn label(&self) -> &'static str {
        match self {
            System::Copy => "Copy",
            System::WordSubstitution => "Word Substitution",
            System::Pbsmt => "PBSMT",
            System::IndoGpt => "IndoGPT",
            System::IndoBartV2 => "IndoBARTv2",
            System::Mbart50 => "mBART-50",
            System::Mt5Base => "mT5-base",
        }
    }
}

/// Table 4 (x → ind), SacreBLEU: (system, 11 languages, average).
pub const TABLE4: [(System, [f64; 11], f64); 7] = [
    (System::Copy, [5.88, 9.99, 4.28, 15.99, 3.44, 0.57, 9.29, 5.11, 18.10, 7.51, 9.24], 8.13),
    (System::WordSubstitution, [7.33, 12.30, 5.02, 16.17, 3.52, 1.67, 17.34, 7.89, 24.17, 12.07, 15.38], 11.17),
    (System::Pbsmt, [25.17, 41.22, 20.94, 47.80, 15.21, 6.68, 46.99, 38.39, 60.56, 32.86, 41.79], 34.33),
    (System::IndoGpt, [7.01, 13.23, 5.27, 19.53, 1.98, 4.26, 27.31, 13.75, 23.03, 10.83, 23.18], 13.58),
    (System::IndoBartV2, [24.44, 40.49, 19.94, 47.81, 12.64, 11.73, 50.64, 36.10, 58.38, 33.50, 45.96], 34.69),
    (System::Mbart50, [18.45, 34.23, 17.43, 41.73, 10.87, 17.92, 39.66, 32.11, 59.66, 29.84, 35.19], 30.64),
    (System::Mt5Base, [18.59, 21.73, 12.85, 42.29, 2.64, 12.96, 45.22, 32.35, 58.65, 25.61, 36.58], 28.13),
];

/// Table 6 (ind → x), SacreBLEU: (system, 11 languages, average).
pub const TABLE6: [(System, [f64; 11], f64); 7] = [
    (System::Copy, [5.89, 10.00, 4.28, 15.99, 3.45, 0.56, 9.29, 5.11, 18.10, 7.52, 9.24], 8.13),
    (System::WordSubstitution, [7.60, 10.31, 5.99, 17.51, 3.57, 0.76, 14.75, 7.58, 22.34, 9.76, 12.38], 10.23),
    (System::Pbsmt, [20.47, 26.48, 18.18, 42.08, 10.84, 7.73, 39.08, 33.26, 52.21, 29.58, 36.04], 28.72),
    (System::IndoGpt, [9.60, 14.17, 8.20, 22.23, 5.18, 5.89, 24.05, 14.44, 26.95, 17.56, 23.15], 15.58),
    (System::IndoBartV2, [19.21, 27.08, 18.41, 40.03, 11.06, 11.53, 39.97, 28.95, 48.48, 27.11, 38.46], 28.21),
    (System::Mbart50, [17.21, 22.67, 17.79, 34.26, 10.78, 3.90, 35.33, 28.63, 43.87, 25.91, 31.21], 24.69),
    (System::Mt5Base, [14.79, 18.07, 18.22, 38.64, 6.68, 11.21, 33.48, 0.96, 45.84, 13.59, 33.79], 21.39),
];

/// Table 5's average SacreBLEU: (system, ind → x, x → ind, eng → x, x → eng).
pub const TABLE5: [(System, [f64; 4]); 3] = [
    (System::Pbsmt, [28.72, 34.33, 4.56, 5.84]),
    (System::IndoBartV2, [28.21, 34.69, 6.36, 7.46]),
    (System::Mbart50, [24.69, 30.64, 7.20, 6.45]),
];

/// The paper's row for `system` in `table`: the 11 figures and the average.
pub fn row(table: Table, system: System) -> Option<([f64; 11], f64)> {
    let rows = match table {
        Table::IntoIndonesian => &TABLE4,
        Table::FromIndonesian => &TABLE6,
    };
    rows.iter().find(|(s, _, _)| *s == system).map(|(_, r, a)| (*r, *a))
}

/// The paper's figure for `system` on `language` (the column) in `table`.
pub fn figure(table: Table, system: System, language: &str) -> Option<f64> {
    let column = non_pivot_languages().position(|l| l == language)?;
    row(table, system).map(|(r, _)| r[column])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_printed_average_is_the_mean_of_its_row() {
        for (table, rows) in [(Table::IntoIndonesian, &TABLE4), (Table::FromIndonesian, &TABLE6)] {
            for (system, row, avg) in rows {
                let mean = row.iter().sum::<f64>() / 11.0;
                assert!((mean - avg).abs() < 0.006, "{table:?} {system:?}: mean {mean:.3} printed {avg}");
            }
        }
        // Table 5's x ↔ ind columns repeat the averages of Tables 4 and 6.
        for (system, [ind_x, x_ind, _, _]) in TABLE5 {
            assert_eq!(row(Table::FromIndonesian, system).unwrap().1, ind_x);
            assert_eq!(row(Table::IntoIndonesian, system).unwrap().1, x_ind);
        }
        assert_eq!(figure(Table::IntoIndonesian, System::Copy, "minangkabau"), Some(18.10));
        assert_eq!(figure(Table::FromIndonesian, System::Mt5Base, "madurese"), Some(0.96));
    }
}
