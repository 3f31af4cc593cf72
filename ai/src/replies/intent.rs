//! What a customer's message asks for, read without a model: a greeting or a thank-you alone, a booking, a
//! person. The words of every supported language count whatever the agent's language (customers greet in
//! English on a Spanish number), matched on the message's words lower-cased, with Arabic's vowel marks and
//! alef forms folded, so `¡Hola!`, `hola` and `HOLA` read alike.

use unicode_segmentation::UnicodeSegmentation;

/// A reading of one message.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reading {
    /// Nothing but a greeting ("hi there!").
    pub greeting_only: bool,
    /// Nothing but thanks ("thanks a lot").
    pub thanks_only: bool,
    /// A booking is asked for.
    pub booking: bool,
    /// The customer asks for a person.
    pub person: bool,
    /// The words left once greetings and thanks are taken out: what to search the knowledge for.
    pub question: String,
}

const GREETINGS: &[&str] = &[
    // en
    "hi",
    "hello",
    "hey",
    "hiya",
    "good morning",
    "good afternoon",
    "good evening",
    "greetings",
    // es
    "hola",
    "buenos dias",
    "buenas tardes",
    "buenas noches",
    "buenas",
    // fr
    "bonjour",
    "salut",
    "bonsoir",
    "coucou",
    // de
    "hallo",
    "guten morgen",
    "guten tag",
    "guten abend",
    "moin",
    "servus",
    // pt
    "ola",
    "oi",
    "bom dia",
    "boa tarde",
    "boa noite",
    // hi (Latin)
    "namaste",
    "namaskar",
    // ar
    "مرحبا",
    "اهلا",
    "السلام عليكم",
    "صباح الخير",
    "مساء الخير",
];

const THANKS: &[&str] = &[
    "thanks",
    "thank you",
    "thx",
    "ty",
    "cheers",
    "gracias",
    "merci",
    "danke",
    "dankeschon",
    "vielen dank",
    "obrigado",
    "obrigada",
    "dhanyavaad",
    "dhanyavad",
    "dhanyawad",
    "shukriya",
    "شكرا",
];

/// Words that may stand beside a greeting or thanks without making the message more than that.
const FILLERS: &[&str] = &[
    "there",
    "team",
    "all",
    "everyone",
    "again",
    "so",
    "much",
    "very",
    "a",
    "lot",
    "you",
    "for",
    "your",
    "help",
    "todos",
    "equipo",
    "muchas",
    "mucho",
    "muy",
    "tous",
    "beaucoup",
    "bien",
    "zusammen",
    "vielen",
    "vielmals",
    "sehr",
    "dank",
    "muito",
    "pessoal",
    "equipe",
    "ji",
    "bahut",
    "sir",
    "madam",
    "جزيلا",
    "لك",
    "لكم",
];

const BOOKING: &[&str] = &[
    "appointment",
    "appointments",
    "booking",
    "reservation",
    "reserve",
    "schedule",
    "book a",
    "book an",
    "book me",
    "cita",
    "reservar",
    "reserva",
    "agendar",
    "rendez vous",
    "reserver",
    "reservation",
    "termin",
    "buchen",
    "reservieren",
    "terminvereinbarung",
    "agendamento",
    "marcar",
    "consulta",
    "موعد",
    "حجز",
    "احجز",
];

const PERSON: &[&str] = &[
    "human",
    "representative",
    "operator",
    "real person",
    "live agent",
    "talk to a person",
    "speak to a person",
    "talk to someone",
    "speak to someone",
    "speak with someone",
    "humano",
    "persona real",
    "hablar con una persona",
    "hablar con alguien",
    "un humain",
    "conseiller",
    "parler a quelqu un",
    "mensch",
    "mitarbeiter",
    "echten person",
    "atendente",
    "pessoa real",
    "falar com alguem",
    "insaan",
    "kisi se baat",
    "موظف",
    "شخص حقيقي",
    "انسان",
];

/// Lower-cased words with Latin accents and Arabic marks folded; an apostrophe parts words (`quelqu'un`).
fn words(text: &str) -> Vec<String> {
    text.unicode_words()
        .flat_map(|w| w.split(['\'', '’']))
        .map(fold)
        .filter(|w| !w.is_empty())
        .collect()
}

fn fold(word: &str) -> String {
    word.to_lowercase()
        .chars()
        .filter_map(|c| match c {
            // Arabic short vowels, tanwin, shadda, sukun, and tatweel.
            '\u{064B}'..='\u{065F}' | '\u{0640}' => None,
            'أ' | 'إ' | 'آ' => Some('ا'),
            'á' | 'à' | 'â' | 'ã' | 'ä' => Some('a'),
            'é' | 'è' | 'ê' | 'ë' => Some('e'),
            'í' | 'ì' | 'î' | 'ï' => Some('i'),
            'ó' | 'ò' | 'ô' | 'õ' | 'ö' => Some('o'),
            'ú' | 'ù' | 'û' | 'ü' => Some('u'),
            'ç' => Some('c'),
            'ñ' => Some('n'),
            'ß' => Some('s'),
            c => Some(c),
        })
        .collect()
}

/// Removes every occurrence of `phrases` (word sequences) from `words`; whether any was found.
fn take_phrases(words: &mut Vec<String>, phrases: &[&str]) -> bool {
    let mut found = false;
    for phrase in phrases {
        let parts: Vec<String> = phrase.split(' ').map(fold).collect();
        let mut at = 0;
        while at + parts.len() <= words.len() {
            if words[at..at + parts.len()] == parts[..] {
                words.drain(at..at + parts.len());
                found = true;
            } else {
                at += 1;
            }
        }
    }
    found
}

fn has_phrase(words: &[String], phrases: &[&str]) -> bool {
    phrases.iter().any(|phrase| {
        let parts: Vec<String> = phrase.split(' ').map(fold).collect();
        words.windows(parts.len()).any(|w| w == &parts[..])
    })
}

/// Reads a message.
pub fn read(text: &str) -> Reading {
    let all = words(text);
    let booking = has_phrase(&all, BOOKING);
    let person = has_phrase(&all, PERSON);
    let mut rest = all.clone();
    let greeted = take_phrases(&mut rest, GREETINGS);
    let thanked = take_phrases(&mut rest, THANKS);
    let only_fillers = rest.iter().all(|w| FILLERS.contains(&w.as_str()));
    Reading {
        greeting_only: greeted && !thanked && only_fillers,
        thanks_only: thanked && only_fillers,
        booking,
        person,
        question: if greeted || thanked {
            rest.join(" ")
        } else {
            text.trim().to_owned()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greetings_and_thanks_alone_in_every_language() {
        for text in [
            "Hi there!",
            "HELLO",
            "¡Hola!",
            "Buenos días",
            "Bonjour à tous",
            "Guten Morgen",
            "Olá",
            "Bom dia",
            "Namaste ji",
            "مرحباً",
            "السلام عليكم",
        ] {
            let reading = read(text);
            assert!(reading.greeting_only, "{text}: {reading:?}");
            assert!(!reading.thanks_only, "{text}");
        }
        for text in [
            "Thanks a lot!",
            "thank you so much",
            "Muchas gracias",
            "Merci beaucoup",
            "Vielen Dank",
            "Obrigada!",
            "Bahut dhanyavaad",
            "شكراً جزيلاً",
        ] {
            assert!(read(text).thanks_only, "{text}: {:?}", read(text));
        }
    }

    #[test]
    fn a_greeting_with_a_question_is_the_question() {
        let reading = read("Hi! What time do you open on Sundays?");
        assert!(!reading.greeting_only);
        assert_eq!(reading.question, "what time do you open on sundays");
        let plain = read("Do you deliver to Pune?");
        assert_eq!(plain.question, "Do you deliver to Pune?");
    }

    #[test]
    fn bookings_and_persons_are_asked_for_in_several_languages() {
        for text in [
            "Can I book an appointment for Friday?",
            "Quiero una cita",
            "Je voudrais prendre rendez-vous",
            "Ich möchte einen Termin",
            "Quero agendar uma consulta",
            "أريد حجز موعد",
        ] {
            assert!(read(text).booking, "{text}");
        }
        assert!(!read("Is this book in stock?").booking, "a book is not a booking");
        for text in [
            "Can I talk to a person please",
            "I want a human",
            "Quiero hablar con una persona",
            "Je veux parler à quelqu'un",
            "Ich möchte mit einem Mitarbeiter sprechen",
            "Quero falar com alguém",
        ] {
            assert!(read(text).person, "{text}");
        }
        assert!(!read("Can I pay in person?").person);
    }
}
