//! Tests for reading quantities and formatting grams and calories.
//!
//! Contract examples go through one `check` helper per function, one line per
//! example, so the API can change without rewriting the examples. Property
//! tests write every number from 0 to 999 the way people do, in English words
//! and in Chinese numerals, and read it back.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::{calories, chinese_number, english_number, grams, parse_quantity};

/// Checks `grams` on a field value written as JSON text: `r#""38 克""#` is a
/// string and `"48"` a number.
#[track_caller]
fn check(input: &str, expected: Option<&str>) {
    let value: Value = serde_json::from_str(input).expect("test input is JSON text");
    assert_eq!(grams(&value).as_deref(), expected, "grams of {input}");
}

/// Checks `calories` on a field value written as JSON text.
#[track_caller]
fn check_calories(input: &str, expected: Option<i64>) {
    let value: Value = serde_json::from_str(input).expect("test input is JSON text");
    assert_eq!(calories(&value), expected, "calories of {input}");
}

#[test]
fn grams_follow_the_contract_examples() {
    check(r#""38 克""#, Some("38克"));
    check(r#""约12.5g""#, Some("12.5克"));
    check("48", Some("48克"));
    check("12.5", Some("12.5克"));
    check(r#""forty-eight 克""#, Some("48克"));
    check(r#""Fifty-two grams""#, Some("52克"));
    check(r#""one hundred and twenty g""#, Some("120克"));
    check(r#""四十八克""#, Some("48克"));
    check(r#""一百二十克""#, Some("120克"));
    check(r#""适量""#, None);
    check(r#""eight g""#, Some("8克"));
    check(r#""eight""#, Some("8克"));
    check(r#""twelve 克""#, Some("12克"));
    check(r#""1,200 g""#, Some("1200克"));
    check(r#""about forty grams""#, None);
    check("null", None);
    check("true", None);
    check("[48]", None);
}

#[test]
fn negative_unbounded_or_infinite_numbers_are_null() {
    check(r#""-5 g""#, None);
    check(r#""−5克""#, None);
    check("-5", None);
    check(r#""1e308""#, None);
    check("1e308", None);
    check(r#""100001 g""#, None);
    check(r#""1e5 g""#, Some("100000克"));
    check(r#""5-6 g""#, Some("5克"));
    check(r#""3 eggs""#, Some("3克"));
    check_calories("1e23", None);
    check_calories(r#""100000000000000000000000 kcal""#, None);
    check_calories("100000", Some(100_000));
    check_calories("-720", None);
}

#[test]
fn calories_follow_the_contract_examples() {
    check_calories(r#""720 kcal""#, Some(720));
    check_calories(r#""seven hundred twenty""#, Some(720));
    check_calories(r#""seven hundred twenty kcal""#, Some(720));
    check_calories("720", Some(720));
    check_calories("719.6", Some(720));
    check_calories(r#""七百二十千卡""#, Some(720));
    check_calories(r#""适量""#, None);
    check_calories("null", None);
}

#[test]
fn english_words_follow_the_contract_rules() {
    assert_eq!(english_number("forty-eight 克"), Some(48));
    assert_eq!(english_number("seven hundred twenty"), Some(720));
    assert_eq!(
        english_number("two thousand three hundred and five"),
        Some(2305)
    );
    assert_eq!(english_number("zero"), Some(0));
    assert_eq!(english_number("grams"), None);
    assert_eq!(english_number(""), None);
    assert_eq!(english_number("eighty-eightg"), None);
    assert_eq!(
        english_number(&"hundred ".repeat(20)),
        None,
        "overflow gives None"
    );
}

#[test]
fn chinese_numerals_follow_the_contract_rules() {
    let cases = [
        ("四十八克", Some(48)),
        ("一百二十克", Some(120)),
        ("十二", Some(12)),
        ("十", Some(10)),
        ("两百", Some(200)),
        ("一百零五", Some(105)),
        ("三千", Some(3000)),
        ("大约四十八克", Some(48)),
        ("七百二十千卡", Some(720)),
        ("七百二十大卡", Some(720)),
        ("三千卡", Some(3)),
        ("千卡：七百二十", Some(720)),
        ("一百二", Some(120)),
        ("一万五千", Some(15000)),
        ("二〇二四", Some(2024)),
        ("二十四五克", Some(24)),
        ("适量", None),
        ("", None),
    ];
    for (input, expected) in cases {
        assert_eq!(chinese_number(input), expected, "chinese_number({input})");
    }
}

#[test]
fn the_first_arabic_number_wins_over_words() {
    assert_eq!(parse_quantity("38 克"), Some(38.0));
    assert_eq!(parse_quantity("10-15g, about twelve"), Some(10.0));
    assert_eq!(parse_quantity("12. 克"), Some(12.0));
    assert_eq!(
        parse_quantity(&"9".repeat(400)),
        None,
        "an infinite value is no number"
    );
}

/// English words for 0–999 as a person would write them. `hyphen` joins tens
/// and units with `-` instead of a space; `and` puts "and" after "hundred".
fn to_words(n: u32, hyphen: bool, and: bool) -> String {
    const UNITS: [&str; 20] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
    ];
    const TENS: [&str; 10] = [
        "", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
    ];
    let word = |i: u32| UNITS[i as usize];
    let below_hundred = |r: u32| match (r / 10, r % 10) {
        (0 | 1, _) => word(r).to_owned(),
        (t, 0) => TENS[t as usize].to_owned(),
        (t, u) => format!(
            "{}{}{}",
            TENS[t as usize],
            if hyphen { "-" } else { " " },
            word(u)
        ),
    };
    match (n / 100, n % 100) {
        (0, r) => below_hundred(r),
        (h, 0) => format!("{} hundred", word(h)),
        (h, r) if and => format!("{} hundred and {}", word(h), below_hundred(r)),
        (h, r) => format!("{} hundred {}", word(h), below_hundred(r)),
    }
}

/// Chinese numerals for 0–999. `one_ten` writes 12 as 一十二 rather than 十二,
/// `liang` writes 200 as 两百, and `ling` picks the character for inner zeros.
fn to_chinese(n: u32, one_ten: bool, liang: bool, ling: char) -> String {
    const DIGITS: [char; 10] = ['零', '一', '二', '三', '四', '五', '六', '七', '八', '九'];
    let (h, t, u) = (n / 100, n / 10 % 10, n % 10);
    let digit = |d: u32| DIGITS[d as usize];
    let mut out = String::new();
    if n == 0 {
        out.push('零');
    }
    if h > 0 {
        out.push(if h == 2 && liang { '两' } else { digit(h) });
        out.push('百');
    }
    if t > 0 {
        if h > 0 || t > 1 || one_ten {
            out.push(digit(t));
        }
        out.push('十');
    } else if h > 0 && u > 0 {
        out.push(ling);
    }
    if u > 0 {
        out.push(digit(u));
    }
    out
}

#[test]
fn the_generators_write_numbers_the_usual_way() {
    assert_eq!(to_words(48, true, false), "forty-eight");
    assert_eq!(to_words(120, false, true), "one hundred and twenty");
    assert_eq!(to_words(720, false, false), "seven hundred twenty");
    assert_eq!(to_chinese(105, false, false, '零'), "一百零五");
    assert_eq!(to_chinese(12, false, false, '零'), "十二");
    assert_eq!(to_chinese(12, true, false, '零'), "一十二");
    assert_eq!(to_chinese(200, false, true, '零'), "两百");
    assert_eq!(to_chinese(110, false, false, '零'), "一百一十");
}

proptest! {
    #![proptest_config(crate::test_support::proptest_config(256))]

    #[test]
    fn english_words_for_0_to_999_read_back(
        n in 0u32..1000,
        hyphen: bool,
        and: bool,
        title_case: bool,
        unit in prop::sample::select(vec!["", " 克", " grams", " g", " gram", "克"]),
    ) {
        // Arrange
        let mut words = to_words(n, hyphen, and);
        if title_case {
            words = words[..1].to_uppercase() + &words[1..];
        }
        let text = format!("{words}{unit}");

        // Act and assert
        prop_assert_eq!(english_number(&text), Some(u64::from(n)), "{}", text);
        prop_assert_eq!(parse_quantity(&text), Some(f64::from(n)), "{}", text);
    }

    #[test]
    fn grams_never_lose_letters_to_the_unit(n in 0u32..1000, hyphen: bool, and: bool) {
        let text = format!("{} g", to_words(n, hyphen, and));
        prop_assert_eq!(grams(&json!(text)), Some(format!("{n}克")), "{}", text);
    }

    #[test]
    fn chinese_numerals_for_0_to_999_read_back(
        n in 0u32..1000,
        one_ten: bool,
        liang: bool,
        ling in prop::sample::select(vec!['零', '〇']),
        prefix in prop::sample::select(vec!["", "约", "大约"]),
        suffix in prop::sample::select(vec!["", "克", "千卡", "大卡"]),
    ) {
        let text = format!("{prefix}{}{suffix}", to_chinese(n, one_ten, liang, ling));
        prop_assert_eq!(chinese_number(&text), Some(u64::from(n)), "{}", text);
        prop_assert_eq!(parse_quantity(&text), Some(f64::from(n)), "{}", text);
    }

    #[test]
    fn number_readers_never_panic(text in any::<String>()) {
        let _ = parse_quantity(&text);
        let _ = grams(&json!(text));
        let _ = calories(&json!(text));
    }
}
