//! Reads the quantities a model writes: "38 克", "约12.5g", "forty-eight 克",
//! "一百二十克", "720 kcal".
//!
//! Responsibility: turn one human-written quantity into a number, and format
//! grams and calories the way the contract wants them. The readers are tried in
//! the contract's order: the first Arabic number, then English number words,
//! then Chinese numerals.
//!
//! Invariants:
//! - Unit words are removed as whole words only, so "eight" keeps its "g".
//! - No input makes these functions panic or overflow: all arithmetic on
//!   numbers read from text is checked, and an overflow gives `None`.
//! - A text with no recognisable number gives `None`, never a guess.

use serde_json::Value;

/// English words for zero to nineteen; a word's index is its value.
const ENGLISH_UNITS: [&str; 20] = [
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

/// English words for twenty to ninety; a word's value is (index + 2) × 10.
const ENGLISH_TENS: [&str; 8] = [
    "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
];

/// Whole words that may surround English number words and carry no value.
const ENGLISH_FILLER: [&str; 8] = [
    "and", "g", "gram", "grams", "kcal", "cal", "calorie", "calories",
];

/// Reads the quantity in `s`: the first Arabic number if there is one, else
/// English number words, else Chinese numerals, else `None`.
///
/// The Arabic reader takes digits with an optional `.digits` fraction, and
/// reads `1,200` as 1200 when the comma is followed by exactly three digits.
/// It ignores any sign. A result that is not finite (hundreds of digits) is
/// treated as no number.
pub fn parse_quantity(s: &str) -> Option<f64> {
    let number = match arabic_number(s) {
        Some(number) => number,
        None => english_number(s).or_else(|| chinese_number(s))? as f64,
    };
    number.is_finite().then_some(number)
}

/// Reads English number words such as "forty-eight 克" or "one hundred and
/// twenty g".
///
/// Case is ignored, `-` and `克` separate words, and the whole words `and`,
/// `g`, `gram`, `grams`, `kcal`, `cal`, `calorie` and `calories` are skipped.
/// Any other word, or a text without a single number word, gives `None`.
pub fn english_number(s: &str) -> Option<u64> {
    let lowered = s.to_lowercase().replace(['-', '克'], " ");
    // `completed` holds the thousands already closed; `group` is the part after.
    let mut completed: u64 = 0;
    let mut group: u64 = 0;
    let mut saw_number = false;
    for word in lowered.split_whitespace() {
        if ENGLISH_FILLER.contains(&word) {
            continue;
        }
        if let Some(value) = ENGLISH_UNITS.iter().position(|unit| *unit == word) {
            group = group.checked_add(value as u64)?;
        } else if let Some(index) = ENGLISH_TENS.iter().position(|tens| *tens == word) {
            group = group.checked_add((index as u64 + 2) * 10)?;
        } else if word == "hundred" {
            group = group.max(1).checked_mul(100)?;
        } else if word == "thousand" {
            completed = completed.checked_add(group.max(1).checked_mul(1000)?)?;
            group = 0;
        } else {
            return None;
        }
        saw_number = true;
    }
    if saw_number {
        completed.checked_add(group)
    } else {
        None
    }
}

/// Reads the first Chinese numeral in `s`, such as "四十八克" or "一百零五".
///
/// Digits are 零〇一二两三四五六七八九 and units are 十百千万; other characters
/// (克, 约, 大约, 卡 …) only delimit the numeral. A 千 directly before 卡 is the
/// unit 千卡 (kilocalorie), not a numeral, so "七百二十千卡" reads 720. A run of
/// bare digits reads positionally ("二〇二四" is 2024), and a colloquial trailing
/// digit scales with the unit before it ("一百二" is 120). "适量" gives `None`.
pub fn chinese_number(s: &str) -> Option<u64> {
    let chars: Vec<char> = s.chars().collect();
    let mut rest = chars.as_slice();
    while let Some(start) = rest.iter().position(|c| is_chinese_numeral(*c)) {
        let from_start = rest.get(start..)?;
        let len = from_start
            .iter()
            .position(|c| !is_chinese_numeral(*c))
            .unwrap_or(from_start.len());
        let (mut run, after) = from_start.split_at(len);
        if after.first() == Some(&'卡')
            && let Some((&'千', numeral)) = run.split_last()
        {
            run = numeral;
        }
        if !run.is_empty() {
            return chinese_run(run);
        }
        rest = after;
    }
    None
}

/// Formats a quantity as grams, `"<number>克"`: integers without decimals
/// ("48克") and fractions as the shortest decimal ("12.5克").
///
/// A JSON number is used as it is; a string goes through [`parse_quantity`].
/// `null`, booleans, arrays, objects and strings without a number give `None`.
pub fn grams(v: &Value) -> Option<String> {
    let number = quantity(v)?;
    // Adding zero turns -0 into 0, so "-0克" never appears.
    Some(format!("{}克", number + 0.0))
}

/// Reads a calorie count by the same rules as [`grams`], rounded to the
/// nearest integer: `"720 kcal"`, `"seven hundred twenty"` and `720` all give
/// 720.
pub fn calories(v: &Value) -> Option<i64> {
    // The cast saturates; `quantity` only returns finite numbers.
    quantity(v).map(|number| number.round() as i64)
}

/// The largest nutrition number (grams or calories) believed: a model that writes
/// more wrote nonsense, and `null` says so.
pub const MAX_NUTRITION: f64 = 100_000.0;

/// Reads a JSON number or a quantity string as a number in `[0, MAX_NUTRITION]`;
/// a negative, non-finite or larger one is `None`.
fn quantity(v: &Value) -> Option<f64> {
    let number = match v {
        Value::Number(number) => number.as_f64()?,
        Value::String(text) if negative(text) => return None,
        Value::String(text) => parse_quantity(text)?,
        _ => return None,
    };
    (number.is_finite() && (0.0..=MAX_NUTRITION).contains(&number)).then_some(number)
}

/// Whether the first Arabic number in `s` carries a minus sign (`-5 g`, `−5克`).
fn negative(s: &str) -> bool {
    let Some(first_digit) = s.find(|c: char| c.is_ascii_digit()) else {
        return false;
    };
    s[..first_digit].trim_end().ends_with(['-', '−'])
}

/// Reads the first Arabic number in `s`, scanning bytes: digits are ASCII, so
/// multi-byte characters around them are never split.
fn arabic_number(s: &str) -> Option<f64> {
    let bytes = s.as_bytes();
    let mut index = bytes.iter().position(u8::is_ascii_digit)?;
    let mut number = String::new();
    let take_digits = |index: &mut usize, number: &mut String| {
        while let Some(&byte) = bytes.get(*index).filter(|b| b.is_ascii_digit()) {
            number.push(char::from(byte));
            *index += 1;
        }
    };
    take_digits(&mut index, &mut number);
    // A comma followed by exactly three digits is a thousands separator.
    while bytes.get(index) == Some(&b',') && is_digit_group(bytes.get(index + 1..)) {
        index += 1;
        take_digits(&mut index, &mut number);
    }
    if bytes.get(index) == Some(&b'.') && bytes.get(index + 1).is_some_and(u8::is_ascii_digit) {
        number.push('.');
        index += 1;
        take_digits(&mut index, &mut number);
    }
    // An exponent right after the digits (`1e308`) belongs to the number.
    if matches!(bytes.get(index), Some(b'e' | b'E')) {
        let signed = usize::from(matches!(bytes.get(index + 1), Some(b'+' | b'-')));
        if bytes
            .get(index + 1 + signed)
            .is_some_and(u8::is_ascii_digit)
        {
            number.push('e');
            number.extend(
                bytes
                    .get(index + 1)
                    .filter(|_| signed == 1)
                    .map(|&b| char::from(b)),
            );
            index += 1 + signed;
            take_digits(&mut index, &mut number);
        }
    }
    number.parse().ok()
}

/// Tells whether `rest` starts with exactly three ASCII digits.
fn is_digit_group(rest: Option<&[u8]>) -> bool {
    let rest = rest.unwrap_or_default();
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    digits == 3
}

/// Returns the value of a Chinese digit character.
fn chinese_digit(c: char) -> Option<u64> {
    let value = match c {
        '零' | '〇' => 0,
        '一' => 1,
        '二' | '两' => 2,
        '三' => 3,
        '四' => 4,
        '五' => 5,
        '六' => 6,
        '七' => 7,
        '八' => 8,
        '九' => 9,
        _ => return None,
    };
    Some(value)
}

/// Returns the value of a Chinese unit character.
fn chinese_unit(c: char) -> Option<u64> {
    match c {
        '十' => Some(10),
        '百' => Some(100),
        '千' => Some(1_000),
        '万' => Some(10_000),
        _ => None,
    }
}

/// Tells whether `c` can be part of a Chinese numeral.
fn is_chinese_numeral(c: char) -> bool {
    chinese_digit(c).is_some() || chinese_unit(c).is_some()
}

/// Reads one run of Chinese numeral characters.
///
/// Two non-zero digits in a row inside a numeral with units, as in "二十四五"
/// (24 to 25), end the numeral at the first of them, the way "24-25" reads 24.
fn chinese_run(run: &[char]) -> Option<u64> {
    if run.iter().all(|c| chinese_digit(*c).is_some()) {
        return run.iter().try_fold(0u64, |acc, c| {
            acc.checked_mul(10)?.checked_add(chinese_digit(*c)?)
        });
    }
    // `completed` holds the 万 groups already closed; `section` the part after;
    // `digit` a digit still waiting for its unit, worth `digit × scale` at the end.
    let mut completed: u64 = 0;
    let mut section: u64 = 0;
    let mut digit: Option<u64> = None;
    let mut scale: u64 = 1;
    let mut previous_unit: Option<u64> = None;
    for &c in run {
        if let Some(value) = chinese_digit(c) {
            if digit.is_some_and(|pending| pending != 0) {
                break;
            }
            // "一百二" is 120: a digit straight after 百, 千 or 万 counts tenths of it.
            scale = previous_unit
                .filter(|unit| *unit >= 100)
                .map_or(1, |unit| unit / 10);
            digit = Some(value);
            previous_unit = None;
        } else if let Some(unit) = chinese_unit(c) {
            let multiplier = digit.take().unwrap_or(if unit == 10_000 { 0 } else { 1 });
            if unit == 10_000 {
                section = section.checked_add(multiplier)?.max(1);
                completed = completed.checked_add(section.checked_mul(unit)?)?;
                section = 0;
            } else {
                section = section.checked_add(multiplier.checked_mul(unit)?)?;
            }
            scale = 1;
            previous_unit = Some(unit);
        }
    }
    let trailing = digit.unwrap_or(0).checked_mul(scale)?;
    completed.checked_add(section)?.checked_add(trailing)
}

#[cfg(test)]
mod tests;
