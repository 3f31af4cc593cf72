//! The subscription price table: per plan and currency, in the smallest currency unit, per month.
//! Defaults are the published prices (README, "Configuration"); `FRONTDESK_PRICES` overrides single entries.

use std::collections::HashMap;

use super::checkout::{Currency, Plan};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PriceTable(HashMap<(Plan, Currency), i64>);

impl Default for PriceTable {
    fn default() -> Self {
        use Currency::*;
        use Plan::*;
        Self(HashMap::from([
            ((Launch, Inr), 299_900),
            ((Launch, Usd), 3_900),
            ((Launch, Aed), 14_900),
            ((Growth, Inr), 799_900),
            ((Growth, Usd), 9_900),
            ((Growth, Aed), 36_900),
            ((Scale, Inr), 1_999_900),
            ((Scale, Usd), 24_900),
            ((Scale, Aed), 91_900),
        ]))
    }
}

impl PriceTable {
    pub fn amount(&self, plan: Plan, currency: Currency) -> i64 {
        // Every (plan, currency) pair has a default, so the lookup cannot miss.
        self.0[&(plan, currency)]
    }

    /// Parses `plan.CURRENCY=amount[,...]` on top of the defaults.
    pub fn parse_overrides(spec: &str) -> Result<Self, String> {
        let mut table = Self::default();
        for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (key, amount) = entry
                .split_once('=')
                .ok_or_else(|| format!("price entry `{entry}` is not plan.CURRENCY=amount"))?;
            let (plan, currency) = key
                .split_once('.')
                .ok_or_else(|| format!("price key `{key}` is not plan.CURRENCY"))?;
            let plan = Plan::parse(plan).ok_or_else(|| format!("unknown plan `{plan}` in FRONTDESK_PRICES"))?;
            let currency = Currency::parse(currency)
                .ok_or_else(|| format!("unknown currency `{currency}` in FRONTDESK_PRICES"))?;
            let amount: i64 = amount
                .trim()
                .parse()
                .ok()
                .filter(|a| *a > 0)
                .ok_or_else(|| format!("price `{amount}` must be a positive integer in the smallest unit"))?;
            table.0.insert((plan, currency), amount);
        }
        Ok(table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_contract() {
        let t = PriceTable::default();
        assert_eq!(t.amount(Plan::Growth, Currency::Inr), 799_900);
        assert_eq!(t.amount(Plan::Scale, Currency::Aed), 91_900);
        assert_eq!(t.amount(Plan::Launch, Currency::Usd), 3_900);
    }

    #[test]
    fn overrides_replace_single_entries() {
        let t = PriceTable::parse_overrides("growth.INR=699900, launch.USD=2900").unwrap();
        assert_eq!(t.amount(Plan::Growth, Currency::Inr), 699_900);
        assert_eq!(t.amount(Plan::Launch, Currency::Usd), 2_900);
        assert_eq!(t.amount(Plan::Scale, Currency::Inr), 1_999_900);
    }

    #[test]
    fn bad_overrides_are_refused_with_a_reason() {
        for bad in [
            "gold.INR=1",
            "growth.EUR=1",
            "growth.INR=-5",
            "growth.INR",
            "growthINR=5",
        ] {
            assert!(PriceTable::parse_overrides(bad).is_err(), "{bad}");
        }
    }
}
