//! The fixed sentences an agent says without a model, in its language: a greeting's and a thank-you's
//! answer, the handoff sentence, the booking offer and a follow-up's nudge. A language is picked by the primary subtag of the
//! agent's BCP 47 tag (`pt-BR` is `pt`); one without sentences here speaks English. `hi` is Hindi as
//! customers type it in Latin script.

/// The sentences of one language.
pub struct Phrases {
    pub greeting: &'static str,
    pub thanks: &'static str,
    pub handoff: &'static str,
    /// Followed by the booking link.
    pub booking: &'static str,
    /// A follow-up after the contact went quiet, when the agent has no message of its own for it.
    pub nudge: &'static str,
}

const EN: Phrases = Phrases {
    greeting: "Hello! How can I help you today?",
    thanks: "You're welcome! Is there anything else I can help you with?",
    handoff: "Thanks for your message. A member of our team will get back to you shortly.",
    booking: "You can book a time that suits you here:",
    nudge: "Just checking in: is there anything else I can help you with?",
};

const ES: Phrases = Phrases {
    greeting: "¡Hola! ¿En qué puedo ayudarte hoy?",
    thanks: "¡De nada! ¿Hay algo más en lo que pueda ayudarte?",
    handoff: "Gracias por tu mensaje. Una persona de nuestro equipo te responderá en breve.",
    booking: "Puedes reservar la hora que mejor te venga aquí:",
    nudge: "Solo quería saber: ¿hay algo más en lo que pueda ayudarte?",
};

const FR: Phrases = Phrases {
    greeting: "Bonjour ! Comment puis-je vous aider aujourd'hui ?",
    thanks: "Avec plaisir ! Puis-je vous aider pour autre chose ?",
    handoff: "Merci pour votre message. Un membre de notre équipe vous répondra très bientôt.",
    booking: "Vous pouvez réserver le créneau qui vous convient ici :",
    nudge: "Je reviens vers vous : puis-je vous aider pour autre chose ?",
};

const DE: Phrases = Phrases {
    greeting: "Hallo! Wie kann ich Ihnen heute helfen?",
    thanks: "Gern geschehen! Kann ich Ihnen sonst noch helfen?",
    handoff: "Danke für Ihre Nachricht. Jemand aus unserem Team meldet sich in Kürze bei Ihnen.",
    booking: "Hier können Sie einen passenden Termin buchen:",
    nudge: "Ich wollte kurz nachfragen: Kann ich Ihnen noch bei etwas helfen?",
};

const PT: Phrases = Phrases {
    greeting: "Olá! Como posso ajudar você hoje?",
    thanks: "De nada! Posso ajudar com mais alguma coisa?",
    handoff: "Obrigado pela sua mensagem. Alguém da nossa equipe vai responder em breve.",
    booking: "Você pode agendar o horário que preferir aqui:",
    nudge: "Só para saber: posso ajudar com mais alguma coisa?",
};

const HI: Phrases = Phrases {
    greeting: "Namaste! Main aapki kya madad kar sakta hoon?",
    thanks: "Aapka swagat hai! Kya main aur kisi cheez mein madad kar sakta hoon?",
    handoff: "Aapke message ke liye dhanyavaad. Hamari team ka koi sadasya jaldi hi aapse sampark karega.",
    booking: "Aap yahan apni suvidha ka samay book kar sakte hain:",
    nudge: "Bas poochna chahta tha: kya main aapki aur kisi cheez mein madad kar sakta hoon?",
};

const AR: Phrases = Phrases {
    greeting: "مرحباً! كيف يمكنني مساعدتك اليوم؟",
    thanks: "على الرحب والسعة! هل هناك شيء آخر يمكنني مساعدتك به؟",
    handoff: "شكراً على رسالتك. سيتواصل معك أحد أعضاء فريقنا قريباً.",
    booking: "يمكنك حجز الموعد الذي يناسبك من هنا:",
    nudge: "أردت فقط الاطمئنان: هل هناك أي شيء آخر يمكنني مساعدتك به؟",
};

/// The primary subtag of a BCP 47 tag, lower-cased.
pub fn primary(tag: &str) -> String {
    tag.split(['-', '_'])
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// The sentences for an agent's language tag.
pub fn of(tag: &str) -> &'static Phrases {
    match primary(tag).as_str() {
        "es" => &ES,
        "fr" => &FR,
        "de" => &DE,
        "pt" => &PT,
        "hi" => &HI,
        "ar" => &AR,
        _ => &EN,
    }
}

/// The language's English name for a model's instructions; a language without one here is named by its tag.
pub fn language_name(tag: &str) -> String {
    let name = match primary(tag).as_str() {
        "en" => "English",
        "es" => "Spanish",
        "fr" => "French",
        "de" => "German",
        "pt" => "Portuguese",
        "hi" => "Hindi, in Latin script",
        "ar" => "Arabic",
        "it" => "Italian",
        "nl" => "Dutch",
        _ => return tag.to_owned(),
    };
    name.to_owned()
}

/// The booking offer: the sentence, the link, and the business's own instructions when it gave some.
pub fn booking_offer(tag: &str, link: &str, instructions: &str) -> String {
    let mut offer = format!("{} {link}", of(tag).booking);
    if !instructions.trim().is_empty() {
        offer.push('\n');
        offer.push_str(instructions.trim());
    }
    offer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_speaks_its_language_and_an_unknown_one_english() {
        assert_eq!(of("pt-BR").greeting, PT.greeting);
        assert_eq!(of("ES").handoff, ES.handoff);
        assert_eq!(of("ja").greeting, EN.greeting);
        assert_eq!(of("").thanks, EN.thanks);
    }

    #[test]
    fn the_booking_offer_carries_the_link_and_the_instructions() {
        let offer = booking_offer("en", "https://cal.example/acme", "Pick any weekday slot.");
        assert_eq!(
            offer,
            "You can book a time that suits you here: https://cal.example/acme\nPick any weekday slot."
        );
        assert!(booking_offer("de", "https://x.example", " ").ends_with("buchen: https://x.example"));
    }
}
