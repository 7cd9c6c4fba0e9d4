//! The price table (`cost.prices`) for agents that report tokens but no
//! cost: `"MODEL=IN/OUT"`, USD per million input and output tokens, `*`
//! for any model. What is computed from it is an estimate, and says so.

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
}

impl Price {
    pub fn cost(&self, tokens_in: u64, tokens_out: u64) -> f64 {
        (tokens_in as f64 * self.input_per_mtok + tokens_out as f64 * self.output_per_mtok) / 1e6
    }
}

/// A `cost.prices` entry that is not `MODEL=IN/OUT` (a setting: exit 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cost.prices: `{entry}` is not MODEL=IN/OUT (USD per million tokens)")]
pub struct PriceError {
    pub entry: String,
}

/// One entry: `gpt-5=1.25/10`.
pub fn parse(entry: &str) -> Result<(String, Price), PriceError> {
    let bad = || PriceError { entry: entry.to_string() };
    let (model, prices) = entry.split_once('=').ok_or_else(bad)?;
    let (i, o) = prices.split_once('/').ok_or_else(bad)?;
    let num = |s: &str| s.trim().parse::<f64>().ok().filter(|n| n.is_finite() && *n >= 0.0);
    let (Some(input_per_mtok), Some(output_per_mtok)) = (num(i), num(o)) else {
        return Err(bad());
    };
    let model = model.trim();
    if model.is_empty() {
        return Err(bad());
    }
    Ok((model.to_string(), Price { input_per_mtok, output_per_mtok }))
}

/// Every entry is well-formed (checked before a run starts).
pub fn check(entries: &[String]) -> Result<(), PriceError> {
    entries.iter().try_for_each(|e| parse(e).map(|_| ()))
}

/// The price for `model`: its own entry, else `*`.
pub fn price(entries: &[String], model: Option<&str>) -> Option<Price> {
    let parsed: Vec<(String, Price)> = entries.iter().filter_map(|e| parse(e).ok()).collect();
    let exact = model.and_then(|m| parsed.iter().find(|(name, _)| name == m));
    exact.or_else(|| parsed.iter().find(|(name, _)| name == "*")).map(|(_, p)| *p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_or_are_refused() {
        let cases: &[(&str, Option<(f64, f64)>)] = &[
            ("gpt-5=1.25/10", Some((1.25, 10.0))),
            (" * = 3 / 15 ", Some((3.0, 15.0))),
            ("gpt-5=1.25", None),
            ("gpt-5", None),
            ("=1/2", None),
            ("m=-1/2", None),
            ("m=a/2", None),
        ];
        for (entry, want) in cases {
            let got = parse(entry).ok().map(|(_, p)| (p.input_per_mtok, p.output_per_mtok));
            assert_eq!(got, *want, "{entry}");
        }
        let e = check(&["a=1/2".into(), "bad".into()]).unwrap_err();
        assert_eq!(e, PriceError { entry: "bad".into() });
        assert!(e.to_string().contains("`bad`"), "{e}");
    }

    #[test]
    fn the_model_own_price_beats_the_wildcard() {
        let table = vec!["*=1/1".to_string(), "gpt-5=2/10".to_string()];
        let cases: &[(Option<&str>, Option<f64>)] =
            &[(Some("gpt-5"), Some(2.0)), (Some("other"), Some(1.0)), (None, Some(1.0))];
        for (model, want) in cases {
            assert_eq!(price(&table, *model).map(|p| p.input_per_mtok), *want, "{model:?}");
        }
        assert_eq!(price(&["gpt-5=2/10".into()], Some("x")), None);
        let p = Price { input_per_mtok: 2.0, output_per_mtok: 10.0 };
        assert!((p.cost(1_000_000, 100_000) - 3.0).abs() < 1e-9);
    }
}
